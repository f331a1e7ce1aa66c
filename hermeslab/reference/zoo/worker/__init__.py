"""Worker modules run under a zoo agent's own virtualenv (see ``__main__``); nothing here imports hermeslab."""
