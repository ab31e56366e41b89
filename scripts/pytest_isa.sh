#!/usr/bin/env bash
# The integration tests again at the ISA levels below the host's best (`make pytest` runs them at the best):
# greedy outputs, batch invariance and speculation identity are properties of the kernels of each level, and a
# test that holds at one level can fail at another (a near-tie, a kernel whose multi-row path differs).
#  - On an AVX-512 host, AVX2 (the level most servers without AVX-512 run) gets the tests whose outputs depend on
#    the kernels most directly: speculation identity, the API's greedy and batching checks, Gemma 3 and the
#    quantized KV cache (AVX2_TESTS).
#  - Every other lower level (scalar, ~5x slower to decode) runs a smaller set: ISA_TESTS.
# tests/ref compares each level with its references by itself (refisa.py), and tests/ref/test_greedy_margin.py
# checks that no greedy text the suites assert sits on a near-tie at any level.
# Usage: [PYTEST_PAR="-n 2 --dist loadgroup"] scripts/pytest_isa.sh PYTHON TACHYON_BIN (PYTEST_PAR: pytest-xdist
# options, as `make pytest-isa` passes them; none: serial)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=$1 BIN=$2
ISA_TESTS="tests/integration/test_spec.py::test_greedy_identical_alone tests/integration/test_spec.py::test_stop_and_max_tokens
           tests/integration/test_api.py tests/integration/test_gemma3_api.py"
AVX2_TESTS="tests/integration/test_spec.py tests/integration/test_api.py tests/integration/test_gemma3_api.py
            tests/integration/test_kv_quant.py"
levels=$("$BIN" info --cpu | sed -n 's/.*host levels: \([^;)]*\).*/\1/p')
best=${levels##* }
for isa in $levels; do
    [ "$isa" = "$best" ] && continue
    if [ "$isa" = avx2 ] && [ "$best" = avx512 ]; then
        tests=$AVX2_TESTS
    else
        tests=$ISA_TESTS
    fi
    echo "== integration tests at TACHYON_ISA=$isa (host best: $best): $(echo $tests)"
    # shellcheck disable=SC2086
    TACHYON_ISA=$isa TACHYON_BIN=$BIN "$PY" -m pytest -q -rs ${PYTEST_PAR:-} -m "not bench" $tests
done
