"""``python -m kgir_lib.config``: every Config field with its help, type and default
(:func:`kgir_lib.config.reference.main`)."""
import sys

from .reference import main

sys.exit(main())
