"""Merge / unmerge of clusters: fingerprints carried by a merge, and each finding's own fingerprint."""
from django.db import migrations, models


def findings_take_their_cluster_fingerprint(apps, schema_editor):
    """Stored findings get the fingerprint of the team cluster they are on: the best known
    before findings kept their report cluster's own."""
    FindingRecord = apps.get_model("diagnosis", "FindingRecord")
    ClusterRecord = apps.get_model("diagnosis", "ClusterRecord")
    FindingRecord.objects.exclude(cluster=None).update(fingerprint=models.Subquery(
        ClusterRecord.objects.filter(pk=models.OuterRef("cluster_id")).values("fingerprint")[:1]))


class Migration(migrations.Migration):

    dependencies = [
        ('diagnosis', '0006_finding_capture_plan'),
    ]

    operations = [
        migrations.AddField(
            model_name='clusterfingerprint',
            name='merged_cluster_id',
            field=models.PositiveIntegerField(blank=True, db_index=True, null=True),
        ),
        migrations.AddField(
            model_name='clusterfingerprint',
            name='merged_from',
            field=models.CharField(blank=True, db_index=True, max_length=128),
        ),
        migrations.AddField(
            model_name='findingrecord',
            name='fingerprint',
            field=models.CharField(blank=True, max_length=128),
        ),
        migrations.AlterField(
            model_name='clusteractivity',
            name='kind',
            field=models.CharField(choices=[('created', 'Created'), ('status', 'Status'), ('assignee', 'Assignee'), ('snooze_until', 'Snooze Until'), ('snooze_count', 'Snooze Count'), ('comment', 'Comment'), ('merged', 'Merged'), ('unmerged', 'Unmerged')], max_length=20),
        ),
        migrations.RunPython(findings_take_their_cluster_fingerprint, migrations.RunPython.noop),
    ]
