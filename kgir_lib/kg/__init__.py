"""Knowledge graph over the corpus (METHOD.md §1): types, extraction, storage."""
from .graph import KnowledgeGraph, Triple

__all__ = ["KnowledgeGraph", "Triple"]
