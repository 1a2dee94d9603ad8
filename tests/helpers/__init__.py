"""Code the tests share (never imported from another test file): the CLI in a subprocess, the tiny
dataset, real MLflow and OpenAI-compatible servers, the bad-input cases."""
