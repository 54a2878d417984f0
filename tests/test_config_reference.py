"""Every Config field carries its help in its metadata, and one command lists every field with its help, type and
default (docs/operations.md renders that list: tests/test_rendered.py checks it is current)."""
from __future__ import annotations

import subprocess
import sys
from dataclasses import fields

import pytest

from kgir_lib.config import Config
from kgir_lib.config.fields import knob
from kgir_lib.config.reference import field_rows, fields_markdown


def test_every_field_says_what_it_does():
    assert all(f.metadata.get("help", "").strip() for f in fields(Config))
    with pytest.raises(ValueError, match="help"):
        knob(1, " ")


def test_the_rows_hold_every_field_with_its_type_default_and_allowed_values():
    rows = {r["name"]: r for r in field_rows()}
    assert list(rows) == [f.name for f in fields(Config)]
    assert rows["top_k"] == {"name": "top_k", "type": "int", "default": "10", "allowed": ">= 1 and <= 1000000",
                             "help": rows["top_k"]["help"]}
    assert rows["reflection_passages"]["allowed"] == "new | all" and rows["datasets"]["default"].startswith('["')
    assert rows["n_questions"]["type"] == "int or null" and rows["eval_methods"]["default"] == "null"
    table = fields_markdown()
    assert len(table) == 2 + len(rows) and table[0].startswith("| field | type | default |")


def test_the_command_lists_every_field():
    out = subprocess.run([sys.executable, "-m", "kgir_lib.config"], capture_output=True, text=True, check=True).stdout
    assert all(f"\n{f.name} (" in "\n" + out for f in fields(Config))
    md = subprocess.run([sys.executable, "-m", "kgir_lib.config", "--markdown"], capture_output=True, text=True,
                        check=True).stdout
    assert md.splitlines() == fields_markdown()
