from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('ingest', '0002_trace_stage'),
    ]

    operations = [
        migrations.AddField(
            model_name='trace',
            name='run_id',
            field=models.CharField(blank=True, max_length=32),
        ),
    ]
