"""The one error type a user sees for bad input: it names the file and what is wrong."""


class IngestError(Exception):
    def __init__(self, path, message):
        super().__init__(f"{path}: {message}")
        self.path = str(path)
        self.reason = message
