// RUN: ein-opt %s --split-input-file --verify-diagnostics

// expected-error @+1 {{#ein.sizes gives 1 sizes for 2 dynamic axes}}
func.func @count(%x: tensor<?x?xf32, #ein.sizes<"t">>) { return }

// -----

// expected-error @+1 {{constant size 4 belongs in the static shape}}
func.func @constant(%x: tensor<?xf32, #ein.sizes<"4">>) { return }

// -----

// expected-error @+1 {{malformed sizes: expected a size at offset 3 of "t +"}}
func.func @malformed(%x: tensor<?xf32, #ein.sizes<"t +">>) { return }

// -----

func.func @mismatch(%x: tensor<?xf32, #ein.sizes<"t">>, %y: tensor<?xf32, #ein.sizes<"t + 1">>) {
  // expected-error @+1 {{shapes [t] and [t + 1] do not broadcast (axis 0: t vs t + 1)}}
  %s = ein.binary add %x, %y : (tensor<?xf32, #ein.sizes<"t">>, tensor<?xf32, #ein.sizes<"t + 1">>) -> tensor<?xf32, #ein.sizes<"t">>
  return
}
