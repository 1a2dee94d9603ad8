"""Small local web pages ragexp serves on 127.0.0.1: a FastAPI app with shared static files
(:mod:`ragexp.web.app`) and files saved whole under a lock shared by processes (:mod:`ragexp.web.edit_session`)."""
