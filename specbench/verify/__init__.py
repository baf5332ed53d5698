"""Layer 3, verification modes: one ModeSpec per mode (verdict, exact per-node law, child rule,
flags), registered in ONE registry; the exact-law module takes the spec.  Imports core."""
