"""DRF's plain tokens (table authtoken_token, from when rest_framework.authtoken was installed)
become hashed ApiTokens: the same keys keep working, and the plain keys are deleted."""
import hashlib

from django.db import migrations

DRF_TABLE = "authtoken_token"


def hash_drf_tokens(apps, schema_editor):
    connection = schema_editor.connection
    if DRF_TABLE not in connection.introspection.table_names():
        return  # a database made after tokens were hashed
    ApiToken = apps.get_model("accounts", "ApiToken")
    quoted = schema_editor.quote_name(DRF_TABLE)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {schema_editor.quote_name('key')}, user_id, created FROM {quoted}")
        rows = cursor.fetchall()
        for key, user_id, created in rows:
            token = ApiToken.objects.create(user_id=user_id, name="migrated", prefix=key[:8],
                                            key_hash=hashlib.sha256(key.encode()).hexdigest())
            ApiToken.objects.filter(pk=token.pk).update(created_at=created)  # auto_now_add ignores it
        cursor.execute(f"DELETE FROM {quoted}")


class Migration(migrations.Migration):
    dependencies = [("accounts", "0002_api_tokens")]

    operations = [migrations.RunPython(hash_drf_tokens, migrations.RunPython.noop)]
