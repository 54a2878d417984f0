"""The one config object of the suite (:class:`Config`), its profiles and checks, and the one run-directory layout.

- :mod:`~kgir_lib.config.fields`: :class:`Config` (every knob), the run-directory layout, the allowed values
  (:data:`~kgir_lib.config.fields.CHOICES`) and number ranges (:data:`~kgir_lib.config.fields.RANGES`);
- :mod:`~kgir_lib.config.checks`: every check of a value, each naming the field;
- :mod:`~kgir_lib.config.profiles`: :func:`load_config` (profile YAML, then overrides), :func:`start_run`.

This package only hands the names on; it sits below everything it configures.
"""
from .fields import (NULL, PROFILE_DIR, PROJECT_ROOT, RANGES, Config, ConfigError, Range, builtin_profiles,
                     default_data_dir, default_figures_dir, default_results_dir, field_range, samples_dir,
                     shared_data_dir)
from .profiles import load_config, profile_identity, start_run

__all__ = ["Config", "ConfigError", "NULL", "load_config", "start_run", "profile_identity", "builtin_profiles",
           "default_data_dir", "samples_dir", "shared_data_dir", "default_results_dir", "default_figures_dir",
           "PROJECT_ROOT", "PROFILE_DIR",
           "RANGES", "Range", "field_range"]
