"""``python -m kgir_lib.llm.response_log``: :func:`kgir_lib.llm.response_log.cli.main`."""
import sys

from .cli import main

sys.exit(main())
