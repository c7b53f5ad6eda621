package broker

// IgnoredRocketMQKeys returns the RocketMQ keys of c's broker.conf that
// Open logs as having no effect.
func IgnoredRocketMQKeys(c Config) []string { return c.rocketmq.ignored }
