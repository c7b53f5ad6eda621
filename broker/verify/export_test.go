package verify

// ScheduleTopic exposes scheduleTopic to the tests.
const ScheduleTopic = scheduleTopic
