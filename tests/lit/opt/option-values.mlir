// Option values out of range are refused when the pipeline is read, before the
// input is: one message naming the pass, the option, the bound and the value,
// exit status 2 (a wrong command line), like an option that does not parse.

// RUN: not jaxpp-opt %s -p 'jaxpp-inline-calls{max-depth=-3}' 2>&1 | filecheck %s --check-prefix=DEPTH
// RUN: not jaxpp-opt %s --jaxpp-inline-calls=max-depth=0 2>&1 | filecheck %s --check-prefix=DEPTH-ZERO
// DEPTH-NOT: Traceback
// DEPTH: jaxpp-opt: error: pass 'jaxpp-inline-calls': option 'max-depth' must be at least 1, got -3
// DEPTH-ZERO: jaxpp-opt: error: pass 'jaxpp-inline-calls': option 'max-depth' must be at least 1, got 0

// RUN: not jaxpp-opt %s -p 'jaxpp-check-shardings{submesh-size=-1}' 2>&1 | filecheck %s --check-prefix=SUBMESH
// SUBMESH: jaxpp-opt: error: pass 'jaxpp-check-shardings': option 'submesh-size' must be at least 0, got -1

// RUN: not jaxpp-opt %s -p 'jaxpp-place-stages{mpmd-dim=-4}' 2>&1 | filecheck %s --check-prefix=MPMD-DIM
// MPMD-DIM: jaxpp-opt: error: pass 'jaxpp-place-stages': option 'mpmd-dim' must be at least 0, got -4

// RUN: not jaxpp-opt %s --pass-pipeline='builtin.module(jaxpp-choose-stages{stage-split=2,-1,1})' 2>&1 \
// RUN:   | filecheck %s --check-prefix=STAGE-SPLIT
// STAGE-SPLIT: jaxpp-opt: error: pass 'jaxpp-choose-stages': option 'stage-split' entries must be at least 1, got -1

// An option given twice is refused (MLIR refuses it too), whichever spelling the
// key has; a bool option takes true/false/1/0 only.
// RUN: not jaxpp-opt %s -p 'jaxpp-choose-stages{stage-split=1,1 stage-split=2}' 2>&1 | filecheck %s --check-prefix=TWICE
// RUN: not jaxpp-opt %s --jaxpp-choose-stages='stage-split=1,1 stage_split=2' 2>&1 | filecheck %s --check-prefix=TWICE-FLAG
// RUN: not jaxpp-opt %s -p 'jaxpp-choose-stages{fuse-tasks=yes}' 2>&1 | filecheck %s --check-prefix=BOOL
// TWICE: jaxpp-opt: error: pass 'jaxpp-choose-stages': option 'stage-split' is given twice (stage-split=1,1 and stage-split=2): give each option once, as MLIR requires
// TWICE-FLAG: jaxpp-opt: error: pass 'jaxpp-choose-stages': option 'stage_split' is given twice (stage-split=1,1 and stage_split=2)
// BOOL: jaxpp-opt: error: pass 'jaxpp-choose-stages': option 'fuse-tasks' expects bool, got 'yes'

// The bounds themselves are accepted.
// RUN: jaxpp-opt %s -p 'jaxpp-inline-calls{max-depth=1},jaxpp-check-shardings{submesh-size=0}' | filecheck %s
// CHECK-LABEL: func.func @main

func.func @main(%a: i32) -> i32 {
  return %a : i32
}
