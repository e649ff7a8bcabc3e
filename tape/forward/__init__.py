"""Forward mode: tangent rules as tensor operations, dual numbers, the jitted tangent program."""
