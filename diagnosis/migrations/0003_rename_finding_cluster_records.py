"""`Finding` -> `FindingRecord`, `Cluster` -> `ClusterRecord`: the engine's result types
(rules.results.Finding, diagnosis.results.Cluster) have those names. Tables are renamed
with them; rows and links stay."""
from django.conf import settings
from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0001_initial'),
        ('diagnosis', '0002_slo_definitions'),
        ('ingest', '0001_initial'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RenameModel(old_name='Cluster', new_name='ClusterRecord'),
        migrations.RenameModel(old_name='Finding', new_name='FindingRecord'),
    ]
