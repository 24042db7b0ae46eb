"""`Rule` -> `TeamRule`: the loader has a `Rule` too. The table is renamed with it; rows,
versions and constraints stay."""
from django.conf import settings
from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0001_initial'),
        ('rules', '0001_initial'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RenameModel(old_name='Rule', new_name='TeamRule'),
    ]
