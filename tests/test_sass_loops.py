"""benchmarks/device/sass_loops.py's reading of ptxas and cuobjdump output, on
text of their shapes (the tool itself needs nvcc and cuobjdump; it runs
where they are, not in the test suite)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks", "device"))
import sass_loops  # noqa: E402

PTXAS = """ptxas info    : Compiling entry function '_Z3fooi' for 'sm_90'
ptxas info    : Function properties for _Z3fooi
    16 bytes stack frame, 12 bytes spill stores, 16 bytes spill loads
ptxas info    : Used 64 registers, used 1 barriers
ptxas info    : Compiling entry function '_Z3barv' for 'sm_90'
ptxas info    : Function properties for _Z3barv
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers
"""

SASS = """
        Function : _Z3fooi
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/                   MOV R2, RZ ;
        /*0020*/                   FADD R2, R2, 1 ;
        /*0030*/                   FADD R2, R2, 1 ;
        /*0040*/              @P0 BRA 0x20 ;
        /*0050*/                   BRA 0x60 ;
        /*0060*/                   FMUL R2, R2, R2 ;
        /*0070*/                   BRA 0x10 ;
        /*0080*/                   EXIT ;
        Function : _Z3barv
        /*0000*/                   EXIT ;
"""


def test_ptxas_report_reads_registers_and_spills():
    assert sass_loops.ptxas_report(PTXAS) == {"_Z3fooi": [64, 28], "_Z3barv": [32, 0]}


def test_loops_are_the_backward_branches_spans():
    k = sass_loops.sass_kernels(SASS)
    assert [len(k["_Z3fooi"]), len(k["_Z3barv"])] == [9, 1]
    # 0x70 -> 0x10: 6 instructions; 0x40 -> 0x20: 2; the forward branch at 0x50 is no loop
    assert sass_loops.loops(k["_Z3fooi"]) == [6, 2]
    assert sass_loops.loops(k["_Z3barv"]) == []


def test_variants_name_their_flags():
    v = sass_loops.parse_variants("main:|two:-DA=1  -DB=2")
    assert v == {"main": (), "two": ("-DA=1", "-DB=2")}
    try:
        sass_loops.parse_variants(":-DA=1")
    except SystemExit as e:
        assert "needs a name" in str(e)
    else:
        raise AssertionError("a nameless variant was taken")
