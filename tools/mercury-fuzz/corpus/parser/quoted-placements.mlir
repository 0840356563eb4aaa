// A regression seed: quoted symbols, a zigzag and a striped placement.
commir.mesh @"m x" shape [2, 2]
commir.kernel @k on @"m x" {
  commir.axis @"a b" = 8 spatial
  commir.axis @j = 4 managed
  commir.buffer @A : [@"a b", @j] f32 in sharding [S(zigzag(0), 1), R]
  commir.buffer @C : [@"a b"] f32 out sharding [S(striped(0, 2))]
  %a = commir.load @A[@"a b", @j] : !commir.tile<f32>
  commir.reduce add %a into @C[@"a b"] : !commir.tile<f32>
}
