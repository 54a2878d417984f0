"""kgir_lib.redact on hand-made texts: exactly what is masked, and what is left as it was."""
from __future__ import annotations

import pytest

from kgir_lib.redact import MASK, env_secrets, looks_like_secret, mask_url, redact, secret_name


def test_a_secret_of_four_characters_is_masked_and_a_shorter_one_is_not():
    """Four characters is the shortest value masked: a 3-character "secret" would mask every occurrence of a
    common syllable in a message."""
    assert redact("the key abcd was refused", ["abcd"]) == f"the key {MASK} was refused"
    assert redact("the key abc was refused", ["abc"]) == "the key abc was refused"
    assert redact("nothing to hide", [None, ""]) == "nothing to hide"


@pytest.mark.parametrize("text, expected", [
    ("GET http://user:pass@host:8000/v1/models", f"GET http://{MASK}@host:8000/v1/models"),
    ("https://bob@example.org/x", f"https://{MASK}@example.org/x"),
    ("Authorization: Bearer abcdEFGH1234", f"Authorization: {MASK}"),
    ("Bearer abcdEFGH1234 sent", f"Bearer {MASK} sent"),
    ("?api_key=abcd1234&model=m", f"?api_key={MASK}&model=m"),
    ('{"password": "hunter22", "n": 1}', f'{{"password": "{MASK}", "n": 1}}'),
    ("http://host:8000/v1 answered 200", "http://host:8000/v1 answered 200"),
])
def test_redact_exact_outputs(text, expected):
    assert redact(text) == expected


def test_token_budgets_are_not_secret_names_but_keys_are():
    assert not secret_name("max_new_tokens")
    assert not secret_name("max_tokens_reflect") and not secret_name("MAX_TOKENS_NER")
    assert secret_name("llm_api_key_env") and secret_name("access_token") and secret_name("Password")
    assert secret_name("max_tokens")  # not a budget field of the config: its name says token
    assert not secret_name("top_k")


def test_env_secrets_reads_only_the_variables_that_are_set(monkeypatch):
    monkeypatch.setenv("KGIR_TEST_SECRET_A", "value-a")
    monkeypatch.delenv("KGIR_TEST_SECRET_B", raising=False)
    assert env_secrets("KGIR_TEST_SECRET_A", "KGIR_TEST_SECRET_B", None) == ["value-a"]


@pytest.mark.parametrize("name, expected", [
    ("KGIR_AB12CD34", True),    # a word of exactly 8 characters with 4 digits and letters: a key
    ("KGIR_AB12CD3", False),    # 7 characters
    ("KGIR_AB1C2D3E", False),   # 8 characters, 3 digits
    ("KGIR_12345678", False),   # 8 digits, no letter
    ("GPU2_KEY", False), ("OPENAI_API_KEY", False),
])
def test_a_pasted_key_is_told_from_a_variable_name_at_the_boundaries(name, expected):
    assert looks_like_secret(name) is expected


@pytest.mark.parametrize("text, expected", [
    ("http://user:sk-1234@host:8000/v1", f"http://{MASK}@host:8000/v1"),
    ("[http://u:p@a:1/v1, https://b@c/v1]", f"[http://{MASK}@a:1/v1, https://{MASK}@c/v1]"),
    ("user:sk-1234@127.0.0.1:9/v1", f"{MASK}@127.0.0.1:9/v1"),          # no scheme
    ("'user:sk-1234@127.0.0.1:9/v1' is not", f"'{MASK}@127.0.0.1:9/v1' is not"),
    ("http://u:p,q@h/v1", f"http://{MASK}@h/v1"),                       # a comma inside the password
    ("http://host:8000/v1, http://other:8001/v1", "http://host:8000/v1, http://other:8001/v1"),
    ("write to bob@example.org at 12:30", "write to bob@example.org at 12:30"),
])
def test_mask_url_masks_the_user_and_password_of_every_url_and_nothing_else(text, expected):
    assert mask_url(text) == expected
    assert redact(text) == expected


def test_the_shell_scripts_mask_through_the_module(tmp_path):
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "kgir_lib.redact", "http://u:sk-kgirtest-77@h:1/v1,http://x:2/v1"],
                         capture_output=True, text=True, check=True)
    assert out.stdout == f"http://{MASK}@h:1/v1,http://x:2/v1\n"
