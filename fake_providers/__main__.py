"""``python -m fake_providers ...`` is ``crashpoint provider serve ...`` without the harness."""

from fake_providers.cli import serve

if __name__ == "__main__":
    serve(prog_name="python -m fake_providers")
