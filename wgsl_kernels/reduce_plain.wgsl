// reduce_plain.wgsl: reduce.wgsl's hooks for a plain reduction, which reads and
// stores its elements as they are (a fused reduction's are generated instead).

fn prologue(v: X) -> T { return T(v); }

fn epilogue(v: T) -> O { return O(v); }
