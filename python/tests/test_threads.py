"""The GIL is released while the library computes: two checks in two threads are inside the library at the same
time, which neither could be if a computation held the GIL (the other thread could not even enter)."""
import threading

import msa_oracle as mo
from msa_oracle import _core
from conftest import make_inputs


def test_two_checks_in_threads_run_at_once():
    config = mo.Config(block_size=16, top_k=4)
    inputs = make_inputs(seed=5, lengths=[(700, 700)], hq=8, hkv=2, d=64, dv=64, di=64)
    ref = mo.reference(**inputs, config=config)
    outputs = dict(topk_indices=ref.topk_indices, out=ref.out.astype("float32"), lse=ref.lse)
    verdicts, errors = [], []

    def one_check():
        try:
            verdicts.append(mo.check(inputs=inputs, outputs=outputs, config=config).passed)
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=one_check) for _ in range(2)]
    most_at_once = 0
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):  # this thread runs only while the GIL is free
        most_at_once = max(most_at_once, _core.computations_in_flight())
    for thread in threads:
        thread.join()
    assert not errors and verdicts == [True, True]
    assert most_at_once == 2
