"""API tokens: only their hash is stored; they expire and can be revoked; DRF's plain tokens
of an older database are hashed by a migration and keep working."""
import importlib
from datetime import timedelta

from django.apps import apps
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import ApiToken, hash_token_key


def status_with(key: str) -> int:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client.get("/api/v1/traces/").status_code


def test_the_key_is_nowhere_in_the_database(alice):
    token, key = ApiToken.issue(alice, name="ci")
    assert status_with(key) == 200
    stored = [str(v) for v in ApiToken.objects.filter(pk=token.pk).values().get().values()]
    assert not any(key in value for value in stored)
    assert token.key_hash == hash_token_key(key) and token.prefix == key[:8]
    assert "authtoken_token" not in connection.introspection.table_names()


def test_an_expired_token_is_refused(alice):
    _, key = ApiToken.issue(alice, expires_at=timezone.now() + timedelta(days=1))
    assert status_with(key) == 200
    ApiToken.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert status_with(key) == 401


def test_a_revoked_token_is_refused(alice):
    token, key = ApiToken.issue(alice)
    token.revoke()
    assert status_with(key) == 401


def test_use_is_recorded(alice):
    token, key = ApiToken.issue(alice)
    assert token.last_used_at is None
    status_with(key)
    token.refresh_from_db()
    assert token.last_used_at is not None


class _Editor:
    """What the migration function uses of a schema editor."""
    connection = connection

    @staticmethod
    def quote_name(name: str) -> str:
        return connection.ops.quote_name(name)


def test_drf_plain_tokens_are_hashed_and_keep_working(alice):
    key = "0123456789abcdef0123456789abcdef01234567"
    with connection.cursor() as cursor:  # the table rest_framework.authtoken left behind
        cursor.execute("CREATE TABLE authtoken_token (\"key\" varchar(40) PRIMARY KEY, "
                       "created timestamp with time zone NOT NULL, user_id bigint NOT NULL)"
                       if connection.vendor == "postgresql" else
                       "CREATE TABLE authtoken_token (\"key\" varchar(40) PRIMARY KEY, "
                       "created datetime NOT NULL, user_id bigint NOT NULL)")
        cursor.execute("INSERT INTO authtoken_token (\"key\", created, user_id) VALUES (%s, %s, %s)",
                       [key, timezone.now(), alice.pk])
    assert status_with(key) == 401  # not read from the plain table any more
    migration = importlib.import_module("accounts.migrations.0003_hash_drf_tokens")
    migration.hash_drf_tokens(apps, _Editor())
    assert status_with(key) == 200
    assert ApiToken.objects.get().name == "migrated"
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM authtoken_token")
        assert cursor.fetchone()[0] == 0
