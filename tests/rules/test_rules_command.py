"""`manage.py rules ...` runs the same code as `tracedoc rules ...`."""
import pytest
from django.core.management import call_command

from tests.corpus import ROOT


def test_validate_builtin_pack_passes():
    call_command("rules", "validate", *sorted(str(p) for p in (ROOT / "rules" / "builtin").glob("*.yaml")))


def test_invalid_rule_exits_1_with_line_and_column(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("id: team.x\nversion: 1\ntitle: A bad rule\nstatus: stable\nseverity: info\n"
                   "match:\n  a: {kind: error}\ncondition: b\nexplain: x\n")
    with pytest.raises(SystemExit) as exit_:
        call_command("rules", "validate", str(bad))
    assert exit_.value.code == 1
    assert f"{bad}:8:" in capsys.readouterr().out
