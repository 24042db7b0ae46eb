from django.contrib import admin

from accounts.models import Team


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ("slug", "name", "created_at")
    prepopulated_fields = {"slug": ("name",)}
    filter_horizontal = ("members",)
