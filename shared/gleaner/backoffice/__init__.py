"""The back office: a JSON API under ``/v1/`` and server-rendered pages under ``/ui/`` over one WSGI app.

``api.py`` answers ``/v1/`` (pure: a request in, ``(status, json)`` out), ``pages.py``
renders ``/ui/`` from the same reads, ``wsgi.py`` is the WSGI callable that ``gleaner
serve`` mounts and a cloud function can serve.
"""
