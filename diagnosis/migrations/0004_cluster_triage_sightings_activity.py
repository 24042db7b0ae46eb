"""Triage states (acknowledged, snoozes), the activity log, and sightings (which trace and
host saw a cluster, when), backfilled from the stored findings."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


def backfill_sightings(apps, schema_editor):
    """One sighting per (cluster, trace, host) of the findings already stored."""
    FindingRecord = apps.get_model("diagnosis", "FindingRecord")
    ClusterSighting = apps.get_model("diagnosis", "ClusterSighting")
    pairs = (FindingRecord.objects.exclude(cluster=None).values_list("cluster_id", "trace_id").distinct())
    Trace = apps.get_model("ingest", "Trace")
    rows = []
    for cluster_id, trace_id in pairs.iterator():
        trace = Trace.objects.only("labels", "report", "created_at").get(pk=trace_id)
        hosts = set(((trace.report or {}).get("trace") or {}).get("hosts") or [])
        if (trace.labels or {}).get("host"):
            hosts.add(str(trace.labels["host"]))
        rows += [ClusterSighting(cluster_id=cluster_id, trace_id=trace_id, host=h[:200], seen_at=trace.created_at)
                 for h in sorted(h for h in hosts if h) or [""]]
    ClusterSighting.objects.bulk_create(rows, batch_size=1000, ignore_conflicts=True)


class Migration(migrations.Migration):

    dependencies = [
        ('diagnosis', '0003_rename_finding_cluster_records'),
        ('ingest', '0003_trace_run_id'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='clusterrecord',
            name='regressions',
            field=models.IntegerField(default=0),
        ),
        migrations.AddField(
            model_name='clusterrecord',
            name='snooze_count',
            field=models.IntegerField(blank=True, help_text='ignored until seen in this many traces', null=True),
        ),
        migrations.AddField(
            model_name='clusterrecord',
            name='snooze_until',
            field=models.DateTimeField(blank=True, help_text='ignored until this time', null=True),
        ),
        migrations.AlterField(
            model_name='clusterrecord',
            name='status',
            field=models.CharField(choices=[('open', 'Open'), ('acknowledged', 'Acknowledged'), ('resolved', 'Resolved'), ('ignored', 'Ignored'), ('regressed', 'Regressed')], db_index=True, default='open', max_length=12),
        ),
        migrations.CreateModel(
            name='ClusterActivity',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('at', models.DateTimeField(db_index=True, default=django.utils.timezone.now)),
                ('kind', models.CharField(choices=[('created', 'Created'), ('status', 'Status'), ('assignee', 'Assignee'), ('snooze_until', 'Snooze Until'), ('snooze_count', 'Snooze Count'), ('comment', 'Comment')], max_length=20)),
                ('old', models.CharField(blank=True, max_length=200)),
                ('new', models.CharField(blank=True, max_length=200)),
                ('text', models.TextField(blank=True)),
                ('actor', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('cluster', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='activity', to='diagnosis.clusterrecord')),
                ('trace', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='ingest.trace')),
            ],
            options={
                'ordering': ['-at', '-id'],
            },
        ),
        migrations.CreateModel(
            name='ClusterSighting',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('host', models.CharField(blank=True, db_index=True, max_length=200)),
                ('seen_at', models.DateTimeField(db_index=True)),
                ('cluster', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='sightings', to='diagnosis.clusterrecord')),
                ('trace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='cluster_sightings', to='ingest.trace')),
            ],
            options={
                'ordering': ['-seen_at', '-id'],
                'constraints': [models.UniqueConstraint(fields=('cluster', 'trace', 'host'), name='sighting_once_per_host')],
            },
        ),
        migrations.RunPython(backfill_sightings, migrations.RunPython.noop),
    ]
