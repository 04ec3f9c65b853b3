"""The bundled demo site and the small loopback HTTP server that serves it (the demo's and the tests')."""
