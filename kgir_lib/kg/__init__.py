"""Knowledge graph over the corpus (KGIR-RAG §2.1): types, extraction, storage."""
from .graph import KnowledgeGraph, Triple
from .parse import DROP_REASONS, parse_triples

__all__ = ["KnowledgeGraph", "Triple", "parse_triples", "DROP_REASONS"]
