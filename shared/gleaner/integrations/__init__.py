"""Gleaner's copy in RAG frameworks, over a Gleaner server's HTTP API (``gleaner serve``).

``client`` is the one HTTP seam (httpx); ``langchain`` (``pip install gleaner[langchain]``) and
``llamaindex`` (``pip install gleaner[llamaindex]``) turn its answers into each framework's
documents. Every document carries where its text came from, so a framework user can cite it:
``url``, ``title``, ``site_domain``, ``document_id``, ``version``, ``text_hash``, ``start``, ``end``
(the byte range of the stored canonical text that ``gleaner slice`` and ``/v1/texts`` return).
"""
