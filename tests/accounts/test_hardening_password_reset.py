"""Password resets only with a mail server: without EMAIL_HOST the reset pages are 404 (never
"sent" with nothing sent); with one, the reset mail is sent."""
from django.core import mail
from django.test import Client


def test_without_a_mail_server_there_is_no_reset_page(alice, settings):
    settings.TRACEDOC_PASSWORD_RESET = False
    assert Client().get("/accounts/password_reset/").status_code == 404
    assert Client().post("/accounts/password_reset/", {"email": "alice@example.com"}).status_code == 404
    assert "password_reset" not in Client().get("/accounts/login/").content.decode()


def test_with_a_mail_server_the_reset_mail_is_sent(alice, settings):
    settings.TRACEDOC_PASSWORD_RESET = True
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    alice.email = "alice@example.com"
    alice.save()
    answer = Client().post("/accounts/password_reset/", {"email": "alice@example.com"})
    assert answer.status_code == 302
    assert [m.to for m in mail.outbox] == [["alice@example.com"]]
    assert "/accounts/reset/" in mail.outbox[0].body
