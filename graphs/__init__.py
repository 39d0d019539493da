"""One module per method; each exports a compiled LangGraph ``graph``."""

METHODS = ("closed_book", "rag", "diva", "toc", "verdict", "sunar", "router")
