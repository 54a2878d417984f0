"""Where the data comes from, fetched and verified (paper §3.1: MuSiQue and HotpotQA in HippoRAG's release layout).

The project ships no dataset text: only the committed manifest (``manifest.json`` here: the upstream files with
a pinned commit, the ordered question ids of each sample, and checksums of every field the suite reads).
``python -m kgir_lib.data_sources fetch`` downloads the upstream files, derives the samples and verifies them
into ``data/samples/``; ``python -m kgir_lib.data_sources verify [DIR]`` checks any data folder.

- :mod:`~kgir_lib.data_sources.sources`: the upstream releases, URLs (``KGIR_HF_ENDPOINT``,
  ``KGIR_GITHUB_RAW_URL``), the manifest and the local folders;
- :mod:`~kgir_lib.data_sources.checksums`: the checksums and the check of a folder against the manifest;
- :mod:`~kgir_lib.data_sources.derive`: the samples from HippoRAG 2's 1000-question release;
- :mod:`~kgir_lib.data_sources.fetch`: the one HTTP download, fetching the samples, HippoRAG 2's full sets.
"""
from .checksums import check_set, verify_dir
from .fetch import download, download_hipporag2, ensure_samples, fetch_samples, is_complete
from .sources import FETCH_COMMAND, SAMPLE_SETS, manifest

__all__ = ["FETCH_COMMAND", "SAMPLE_SETS", "check_set", "download", "download_hipporag2", "ensure_samples",
           "fetch_samples", "is_complete", "manifest", "verify_dir"]
