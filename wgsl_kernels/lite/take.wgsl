// webgrad.export take (embedding): out[i, :] = table[index[i], :], table (rows, inner) and index
// contiguous from their offsets; a negative index counts from the end. One thread per output
// element. P: total, rows, inner, table offset, index offset.
@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read> table: array<${type}>;
@group(0) @binding(2) var<storage, read> index: array<i32>;
@group(0) @binding(3) var<storage, read_write> out: array<${type}>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.x + gid.y * groups.x * 64u;
  if (i >= P[0]) { return; }
  let inner = P[2];
  var row = index[P[4] + i / inner];
  if (row < 0) { row += i32(P[1]); }
  out[i] = table[P[3] + u32(row) * inner + i % inner];
}
