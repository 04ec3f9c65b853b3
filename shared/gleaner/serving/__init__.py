"""The HTTP surface shared by `gleaner serve` and the functions: the server, the host gate, request and
response helpers, the texts API, the feed poller's webhook and the check on outside text. The back office's
and the agents' routes live in their own rooms beside this one (backoffice/, agents/)."""
