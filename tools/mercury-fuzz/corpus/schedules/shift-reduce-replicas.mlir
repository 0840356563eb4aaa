// mercury-fuzz seed 27824: shift-reduce on a 2x2 mesh whose level 1 no parallel loop uses; both
// replicas sent their partial to the owner (relative error 1) before the lowering let only
// the replica that matches the owner on that level send.
// step: join{outer=k inner=n}
// step: parallelize{axis=m level=1 shard=true placement=block}
// step: tile{axis=k factor=2 outer=k_o258 inner=k_i258}
// step: parallelize{axis=k_o258 level=0 shard=true}
// step: tile{axis=m factor=2 outer=m_o504 inner=m_i504}
// step: shift{axis=m_o504 by=k_o258}
commir.mesh @mesh shape [2, 2] names ["l0", "l1"]
commir.kernel @gemm_rs on @mesh {
  commir.axis @m = 8 spatial
  commir.axis @k = 8 managed
  commir.axis @n = 4 spatial
  commir.buffer @A : [@m, @k] f32 in sharding [R, S(0, 1)]
  commir.buffer @B : [@k, @n] f32 in sharding [S(0, 1), R]
  commir.buffer @C : [@m, @n] f32 out sharding [S(0, 1), R]
  %a = commir.load @A[@m, @k] : !commir.tile<f32>
  %b = commir.load @B[@k, @n] : !commir.tile<f32>
  %c = commir.patch "gemm" (%a, %b) : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %c into @C[@m, @n] : !commir.tile<f32>
}
