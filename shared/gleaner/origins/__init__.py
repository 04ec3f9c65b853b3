"""Every origin the ADR names besides a crawl: uploads and feedback, and the detector of contradictions.

- ``formats``: which format a file is, its ceiling, its markdown (pure);
- ``identity``: where an upload or a feedback lives in the site's tree, and its URL-like key (pure);
- ``judge``: a pair of passages judged (the rules judge, and the seam a language model plugs into);
- ``modeljudge``: the configured language model as that judge, the rules standing in when it fails;
- ``store``: their documents and the ingest jobs;
- ``landing``: a text kept as a document through the snapshot and ingest steps a page goes through;
- ``uploads``, ``feedback``: the two use cases; ``contradictions``: the detector ingest runs;
- ``remarks``: a client's comments and flags on a document, with who and when.
"""
