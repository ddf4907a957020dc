# Sourced by the scripts that pip install into the python3 on PATH: Debian's own Python is
# "externally managed" (PEP 668) and pip warns about root, both meant here.
pip_flags=(--quiet)
pip_help="$(python3 -m pip install --help)"
for flag in --break-system-packages --root-user-action=ignore; do
  if grep -q -- "${flag%%=*}" <<<"$pip_help"; then pip_flags+=("$flag"); fi
done
