// --help documents the pipeline forms and how to add a pass; --list-passes lists
// every registered jaxpp pass with its summary and options.

// RUN: jaxpp-opt --help | filecheck %s --check-prefix=HELP
// HELP: usage: jaxpp-opt
// HELP: --pass-pipeline='builtin.module(jaxpp-xyz{key=value key2=value},canonicalize)'
// HELP: -p 'jaxpp-xyz{key=value},canonicalize'
// HELP: --jaxpp-xyz='key=value key2=value' --canonicalize
// HELP: --split-input-file
// HELP: --verify-diagnostics
// HELP: Writing and registering a new pass
// HELP: @register_pass

// RUN: jaxpp-opt --list-passes | filecheck %s --check-prefix=LIST
// LIST: Registered jaxpp passes
// LIST: jaxpp-inline-calls
// LIST-NEXT: Inline every func.call
// LIST-NEXT: options:
// LIST-NEXT: max-depth: int = 64
