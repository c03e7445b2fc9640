"""`hearth keys create/list/revoke` in a temporary data folder."""

from engine.cli import main
from engine.server.api_keys import KeyStore


def test_create_list_revoke(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HEARTH_DATA_DIR", str(tmp_path))
    assert main(["keys", "create", "laptop"]) == 0
    key = capsys.readouterr().out.strip()
    assert key.startswith("hk-") and KeyStore().name_of(key.encode()) == "laptop"
    assert main(["keys", "list"]) == 0
    listed = capsys.readouterr().out
    assert "laptop" in listed and key[:7] in listed and key not in listed
    assert main(["keys", "create", "laptop"]) == 1
    assert "already a key named" in capsys.readouterr().err
    assert main(["keys", "revoke", "laptop"]) == 0
    assert KeyStore().listed() == ()
    assert main(["keys", "revoke", "laptop"]) == 1
