pub struct FaultPlan; pub struct FaultRule; pub enum FaultKind {} pub enum OpKind {}
