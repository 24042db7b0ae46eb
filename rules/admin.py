from django.contrib import admin

from rules.models import RuleVersion, TeamRule


class RuleVersionInline(admin.TabularInline):
    model = RuleVersion
    fields = ("version", "saved_by", "replaced_at")
    readonly_fields = fields
    extra = 0
    can_delete = False


@admin.register(TeamRule)
class TeamRuleAdmin(admin.ModelAdmin):
    list_display = ("rule_id", "version", "team", "severity", "enabled", "updated_at")
    list_filter = ("enabled", "severity", "team")
    search_fields = ("rule_id", "title")
    readonly_fields = ("rule_id", "version", "title", "severity", "owner")
    inlines = [RuleVersionInline]
