package remoting

import "strconv"

// RequestCode is a request's Command.Code, with RocketMQ's numeric values
// (Java's RequestCode).
type RequestCode int16

// ResponseCode is a response's Command.Code, with RocketMQ's numeric values
// (Java's ResponseCode and RemotingSysResponseCode).
type ResponseCode int16

// Request codes. The comment is the Java name, which String returns.
const (
	ReqSendMessage                      RequestCode = 10  // SEND_MESSAGE
	ReqPullMessage                      RequestCode = 11  // PULL_MESSAGE
	ReqQueryMessage                     RequestCode = 12  // QUERY_MESSAGE
	ReqQueryBrokerOffset                RequestCode = 13  // QUERY_BROKER_OFFSET
	ReqQueryConsumerOffset              RequestCode = 14  // QUERY_CONSUMER_OFFSET
	ReqUpdateConsumerOffset             RequestCode = 15  // UPDATE_CONSUMER_OFFSET
	ReqUpdateAndCreateTopic             RequestCode = 17  // UPDATE_AND_CREATE_TOPIC
	ReqGetAllTopicConfig                RequestCode = 21  // GET_ALL_TOPIC_CONFIG
	ReqGetTopicConfigList               RequestCode = 22  // GET_TOPIC_CONFIG_LIST
	ReqGetTopicNameList                 RequestCode = 23  // GET_TOPIC_NAME_LIST
	ReqUpdateBrokerConfig               RequestCode = 25  // UPDATE_BROKER_CONFIG
	ReqGetBrokerConfig                  RequestCode = 26  // GET_BROKER_CONFIG
	ReqTriggerDeleteFiles               RequestCode = 27  // TRIGGER_DELETE_FILES
	ReqGetBrokerRuntimeInfo             RequestCode = 28  // GET_BROKER_RUNTIME_INFO
	ReqSearchOffsetByTimestamp          RequestCode = 29  // SEARCH_OFFSET_BY_TIMESTAMP
	ReqGetMaxOffset                     RequestCode = 30  // GET_MAX_OFFSET
	ReqGetMinOffset                     RequestCode = 31  // GET_MIN_OFFSET
	ReqGetEarliestMsgStoreTime          RequestCode = 32  // GET_EARLIEST_MSG_STORETIME
	ReqViewMessageByID                  RequestCode = 33  // VIEW_MESSAGE_BY_ID
	ReqHeartBeat                        RequestCode = 34  // HEART_BEAT
	ReqUnregisterClient                 RequestCode = 35  // UNREGISTER_CLIENT
	ReqConsumerSendMsgBack              RequestCode = 36  // CONSUMER_SEND_MSG_BACK
	ReqEndTransaction                   RequestCode = 37  // END_TRANSACTION
	ReqGetConsumerListByGroup           RequestCode = 38  // GET_CONSUMER_LIST_BY_GROUP
	ReqCheckTransactionState            RequestCode = 39  // CHECK_TRANSACTION_STATE
	ReqNotifyConsumerIDsChanged         RequestCode = 40  // NOTIFY_CONSUMER_IDS_CHANGED
	ReqLockBatchMQ                      RequestCode = 41  // LOCK_BATCH_MQ
	ReqUnlockBatchMQ                    RequestCode = 42  // UNLOCK_BATCH_MQ
	ReqGetAllConsumerOffset             RequestCode = 43  // GET_ALL_CONSUMER_OFFSET
	ReqGetAllDelayOffset                RequestCode = 45  // GET_ALL_DELAY_OFFSET
	ReqCheckClientConfig                RequestCode = 46  // CHECK_CLIENT_CONFIG
	ReqPutKVConfig                      RequestCode = 100 // PUT_KV_CONFIG
	ReqGetKVConfig                      RequestCode = 101 // GET_KV_CONFIG
	ReqDeleteKVConfig                   RequestCode = 102 // DELETE_KV_CONFIG
	ReqRegisterBroker                   RequestCode = 103 // REGISTER_BROKER
	ReqUnregisterBroker                 RequestCode = 104 // UNREGISTER_BROKER
	ReqGetRouteInfoByTopic              RequestCode = 105 // GET_ROUTEINFO_BY_TOPIC
	ReqGetBrokerClusterInfo             RequestCode = 106 // GET_BROKER_CLUSTER_INFO
	ReqUpdateAndCreateSubscriptionGroup RequestCode = 200 // UPDATE_AND_CREATE_SUBSCRIPTIONGROUP
	ReqGetAllSubscriptionGroupConfig    RequestCode = 201 // GET_ALL_SUBSCRIPTIONGROUP_CONFIG
	ReqGetTopicStatsInfo                RequestCode = 202 // GET_TOPIC_STATS_INFO
	ReqGetConsumerConnectionList        RequestCode = 203 // GET_CONSUMER_CONNECTION_LIST
	ReqGetProducerConnectionList        RequestCode = 204 // GET_PRODUCER_CONNECTION_LIST
	ReqWipeWritePermOfBroker            RequestCode = 205 // WIPE_WRITE_PERM_OF_BROKER
	ReqGetAllTopicListFromNameServer    RequestCode = 206 // GET_ALL_TOPIC_LIST_FROM_NAMESERVER
	ReqDeleteSubscriptionGroup          RequestCode = 207 // DELETE_SUBSCRIPTIONGROUP
	ReqGetConsumeStats                  RequestCode = 208 // GET_CONSUME_STATS
	ReqSuspendConsumer                  RequestCode = 209 // SUSPEND_CONSUMER
	ReqResumeConsumer                   RequestCode = 210 // RESUME_CONSUMER
	ReqResetConsumerOffsetInConsumer    RequestCode = 211 // RESET_CONSUMER_OFFSET_IN_CONSUMER
	ReqResetConsumerOffsetInBroker      RequestCode = 212 // RESET_CONSUMER_OFFSET_IN_BROKER
	ReqAdjustConsumerThreadPool         RequestCode = 213 // ADJUST_CONSUMER_THREAD_POOL
	ReqWhoConsumeTheMessage             RequestCode = 214 // WHO_CONSUME_THE_MESSAGE
	ReqDeleteTopicInBroker              RequestCode = 215 // DELETE_TOPIC_IN_BROKER
	ReqDeleteTopicInNameServer          RequestCode = 216 // DELETE_TOPIC_IN_NAMESRV
	ReqGetKVListByNamespace             RequestCode = 219 // GET_KVLIST_BY_NAMESPACE
	ReqResetConsumerClientOffset        RequestCode = 220 // RESET_CONSUMER_CLIENT_OFFSET
	ReqGetConsumerStatusFromClient      RequestCode = 221 // GET_CONSUMER_STATUS_FROM_CLIENT
	ReqInvokeBrokerToResetOffset        RequestCode = 222 // INVOKE_BROKER_TO_RESET_OFFSET
	ReqInvokeBrokerToGetConsumerStatus  RequestCode = 223 // INVOKE_BROKER_TO_GET_CONSUMER_STATUS
	ReqGetTopicsByCluster               RequestCode = 224 // GET_TOPICS_BY_CLUSTER
	ReqQueryTopicConsumeByWho           RequestCode = 300 // QUERY_TOPIC_CONSUME_BY_WHO
	ReqQueryConsumeTimeSpan             RequestCode = 303 // QUERY_CONSUME_TIME_SPAN
	ReqGetSystemTopicListFromNS         RequestCode = 304 // GET_SYSTEM_TOPIC_LIST_FROM_NS
	ReqGetSystemTopicListFromBroker     RequestCode = 305 // GET_SYSTEM_TOPIC_LIST_FROM_BROKER
	ReqCleanExpiredConsumeQueue         RequestCode = 306 // CLEAN_EXPIRED_CONSUMEQUEUE
	ReqGetConsumerRunningInfo           RequestCode = 307 // GET_CONSUMER_RUNNING_INFO
	ReqQueryCorrectionOffset            RequestCode = 308 // QUERY_CORRECTION_OFFSET
	ReqConsumeMessageDirectly           RequestCode = 309 // CONSUME_MESSAGE_DIRECTLY
	ReqSendMessageV2                    RequestCode = 310 // SEND_MESSAGE_V2
	ReqCloneGroupOffset                 RequestCode = 314 // CLONE_GROUP_OFFSET
	ReqViewBrokerStatsData              RequestCode = 315 // VIEW_BROKER_STATS_DATA
	ReqCleanUnusedTopic                 RequestCode = 316 // CLEAN_UNUSED_TOPIC
	ReqGetBrokerConsumeStats            RequestCode = 317 // GET_BROKER_CONSUME_STATS
	ReqUpdateNameServerConfig           RequestCode = 318 // UPDATE_NAMESRV_CONFIG
	ReqGetNameServerConfig              RequestCode = 319 // GET_NAMESRV_CONFIG
	ReqSendBatchMessage                 RequestCode = 320 // SEND_BATCH_MESSAGE
	ReqQueryConsumeQueue                RequestCode = 321 // QUERY_CONSUME_QUEUE
	ReqQueryDataVersion                 RequestCode = 322 // QUERY_DATA_VERSION
	ReqResumeCheckHalfMessage           RequestCode = 323 // RESUME_CHECK_HALF_MESSAGE
	ReqSendReplyMessage                 RequestCode = 324 // SEND_REPLY_MESSAGE
	ReqSendReplyMessageV2               RequestCode = 325 // SEND_REPLY_MESSAGE_V2
	ReqPushReplyMessageToClient         RequestCode = 326 // PUSH_REPLY_MESSAGE_TO_CLIENT
)

var requestCodeNames = map[RequestCode]string{
	ReqSendMessage:                      "SEND_MESSAGE",
	ReqPullMessage:                      "PULL_MESSAGE",
	ReqQueryMessage:                     "QUERY_MESSAGE",
	ReqQueryBrokerOffset:                "QUERY_BROKER_OFFSET",
	ReqQueryConsumerOffset:              "QUERY_CONSUMER_OFFSET",
	ReqUpdateConsumerOffset:             "UPDATE_CONSUMER_OFFSET",
	ReqUpdateAndCreateTopic:             "UPDATE_AND_CREATE_TOPIC",
	ReqGetAllTopicConfig:                "GET_ALL_TOPIC_CONFIG",
	ReqGetTopicConfigList:               "GET_TOPIC_CONFIG_LIST",
	ReqGetTopicNameList:                 "GET_TOPIC_NAME_LIST",
	ReqUpdateBrokerConfig:               "UPDATE_BROKER_CONFIG",
	ReqGetBrokerConfig:                  "GET_BROKER_CONFIG",
	ReqTriggerDeleteFiles:               "TRIGGER_DELETE_FILES",
	ReqGetBrokerRuntimeInfo:             "GET_BROKER_RUNTIME_INFO",
	ReqSearchOffsetByTimestamp:          "SEARCH_OFFSET_BY_TIMESTAMP",
	ReqGetMaxOffset:                     "GET_MAX_OFFSET",
	ReqGetMinOffset:                     "GET_MIN_OFFSET",
	ReqGetEarliestMsgStoreTime:          "GET_EARLIEST_MSG_STORETIME",
	ReqViewMessageByID:                  "VIEW_MESSAGE_BY_ID",
	ReqHeartBeat:                        "HEART_BEAT",
	ReqUnregisterClient:                 "UNREGISTER_CLIENT",
	ReqConsumerSendMsgBack:              "CONSUMER_SEND_MSG_BACK",
	ReqEndTransaction:                   "END_TRANSACTION",
	ReqGetConsumerListByGroup:           "GET_CONSUMER_LIST_BY_GROUP",
	ReqCheckTransactionState:            "CHECK_TRANSACTION_STATE",
	ReqNotifyConsumerIDsChanged:         "NOTIFY_CONSUMER_IDS_CHANGED",
	ReqLockBatchMQ:                      "LOCK_BATCH_MQ",
	ReqUnlockBatchMQ:                    "UNLOCK_BATCH_MQ",
	ReqGetAllConsumerOffset:             "GET_ALL_CONSUMER_OFFSET",
	ReqGetAllDelayOffset:                "GET_ALL_DELAY_OFFSET",
	ReqCheckClientConfig:                "CHECK_CLIENT_CONFIG",
	ReqPutKVConfig:                      "PUT_KV_CONFIG",
	ReqGetKVConfig:                      "GET_KV_CONFIG",
	ReqDeleteKVConfig:                   "DELETE_KV_CONFIG",
	ReqRegisterBroker:                   "REGISTER_BROKER",
	ReqUnregisterBroker:                 "UNREGISTER_BROKER",
	ReqGetRouteInfoByTopic:              "GET_ROUTEINFO_BY_TOPIC",
	ReqGetBrokerClusterInfo:             "GET_BROKER_CLUSTER_INFO",
	ReqUpdateAndCreateSubscriptionGroup: "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP",
	ReqGetAllSubscriptionGroupConfig:    "GET_ALL_SUBSCRIPTIONGROUP_CONFIG",
	ReqGetTopicStatsInfo:                "GET_TOPIC_STATS_INFO",
	ReqGetConsumerConnectionList:        "GET_CONSUMER_CONNECTION_LIST",
	ReqGetProducerConnectionList:        "GET_PRODUCER_CONNECTION_LIST",
	ReqWipeWritePermOfBroker:            "WIPE_WRITE_PERM_OF_BROKER",
	ReqGetAllTopicListFromNameServer:    "GET_ALL_TOPIC_LIST_FROM_NAMESERVER",
	ReqDeleteSubscriptionGroup:          "DELETE_SUBSCRIPTIONGROUP",
	ReqGetConsumeStats:                  "GET_CONSUME_STATS",
	ReqSuspendConsumer:                  "SUSPEND_CONSUMER",
	ReqResumeConsumer:                   "RESUME_CONSUMER",
	ReqResetConsumerOffsetInConsumer:    "RESET_CONSUMER_OFFSET_IN_CONSUMER",
	ReqResetConsumerOffsetInBroker:      "RESET_CONSUMER_OFFSET_IN_BROKER",
	ReqAdjustConsumerThreadPool:         "ADJUST_CONSUMER_THREAD_POOL",
	ReqWhoConsumeTheMessage:             "WHO_CONSUME_THE_MESSAGE",
	ReqDeleteTopicInBroker:              "DELETE_TOPIC_IN_BROKER",
	ReqDeleteTopicInNameServer:          "DELETE_TOPIC_IN_NAMESRV",
	ReqGetKVListByNamespace:             "GET_KVLIST_BY_NAMESPACE",
	ReqResetConsumerClientOffset:        "RESET_CONSUMER_CLIENT_OFFSET",
	ReqGetConsumerStatusFromClient:      "GET_CONSUMER_STATUS_FROM_CLIENT",
	ReqInvokeBrokerToResetOffset:        "INVOKE_BROKER_TO_RESET_OFFSET",
	ReqInvokeBrokerToGetConsumerStatus:  "INVOKE_BROKER_TO_GET_CONSUMER_STATUS",
	ReqGetTopicsByCluster:               "GET_TOPICS_BY_CLUSTER",
	ReqQueryTopicConsumeByWho:           "QUERY_TOPIC_CONSUME_BY_WHO",
	ReqQueryConsumeTimeSpan:             "QUERY_CONSUME_TIME_SPAN",
	ReqGetSystemTopicListFromNS:         "GET_SYSTEM_TOPIC_LIST_FROM_NS",
	ReqGetSystemTopicListFromBroker:     "GET_SYSTEM_TOPIC_LIST_FROM_BROKER",
	ReqCleanExpiredConsumeQueue:         "CLEAN_EXPIRED_CONSUMEQUEUE",
	ReqGetConsumerRunningInfo:           "GET_CONSUMER_RUNNING_INFO",
	ReqQueryCorrectionOffset:            "QUERY_CORRECTION_OFFSET",
	ReqConsumeMessageDirectly:           "CONSUME_MESSAGE_DIRECTLY",
	ReqSendMessageV2:                    "SEND_MESSAGE_V2",
	ReqCloneGroupOffset:                 "CLONE_GROUP_OFFSET",
	ReqViewBrokerStatsData:              "VIEW_BROKER_STATS_DATA",
	ReqCleanUnusedTopic:                 "CLEAN_UNUSED_TOPIC",
	ReqGetBrokerConsumeStats:            "GET_BROKER_CONSUME_STATS",
	ReqUpdateNameServerConfig:           "UPDATE_NAMESRV_CONFIG",
	ReqGetNameServerConfig:              "GET_NAMESRV_CONFIG",
	ReqSendBatchMessage:                 "SEND_BATCH_MESSAGE",
	ReqQueryConsumeQueue:                "QUERY_CONSUME_QUEUE",
	ReqQueryDataVersion:                 "QUERY_DATA_VERSION",
	ReqResumeCheckHalfMessage:           "RESUME_CHECK_HALF_MESSAGE",
	ReqSendReplyMessage:                 "SEND_REPLY_MESSAGE",
	ReqSendReplyMessageV2:               "SEND_REPLY_MESSAGE_V2",
	ReqPushReplyMessageToClient:         "PUSH_REPLY_MESSAGE_TO_CLIENT",
}

// Response codes. The comment is the Java name, which String returns.
// Java 5 reuses 209-211 (ACL failures in 4.x); the 5.x names are used.
const (
	ResSuccess                    ResponseCode = 0    // SUCCESS
	ResSystemError                ResponseCode = 1    // SYSTEM_ERROR
	ResSystemBusy                 ResponseCode = 2    // SYSTEM_BUSY
	ResRequestCodeNotSupported    ResponseCode = 3    // REQUEST_CODE_NOT_SUPPORTED
	ResTransactionFailed          ResponseCode = 4    // TRANSACTION_FAILED
	ResFlushDiskTimeout           ResponseCode = 10   // FLUSH_DISK_TIMEOUT
	ResSlaveNotAvailable          ResponseCode = 11   // SLAVE_NOT_AVAILABLE
	ResFlushSlaveTimeout          ResponseCode = 12   // FLUSH_SLAVE_TIMEOUT
	ResMessageIllegal             ResponseCode = 13   // MESSAGE_ILLEGAL
	ResServiceNotAvailable        ResponseCode = 14   // SERVICE_NOT_AVAILABLE
	ResVersionNotSupported        ResponseCode = 15   // VERSION_NOT_SUPPORTED
	ResNoPermission               ResponseCode = 16   // NO_PERMISSION
	ResTopicNotExist              ResponseCode = 17   // TOPIC_NOT_EXIST
	ResTopicExistAlready          ResponseCode = 18   // TOPIC_EXIST_ALREADY
	ResPullNotFound               ResponseCode = 19   // PULL_NOT_FOUND
	ResPullRetryImmediately       ResponseCode = 20   // PULL_RETRY_IMMEDIATELY
	ResPullOffsetMoved            ResponseCode = 21   // PULL_OFFSET_MOVED
	ResQueryNotFound              ResponseCode = 22   // QUERY_NOT_FOUND
	ResSubscriptionParseFailed    ResponseCode = 23   // SUBSCRIPTION_PARSE_FAILED
	ResSubscriptionNotExist       ResponseCode = 24   // SUBSCRIPTION_NOT_EXIST
	ResSubscriptionNotLatest      ResponseCode = 25   // SUBSCRIPTION_NOT_LATEST
	ResSubscriptionGroupNotExist  ResponseCode = 26   // SUBSCRIPTION_GROUP_NOT_EXIST
	ResFilterDataNotExist         ResponseCode = 27   // FILTER_DATA_NOT_EXIST
	ResFilterDataNotLatest        ResponseCode = 28   // FILTER_DATA_NOT_LATEST
	ResInvalidParameter           ResponseCode = 29   // INVALID_PARAMETER
	ResTransactionShouldCommit    ResponseCode = 200  // TRANSACTION_SHOULD_COMMIT
	ResTransactionShouldRollback  ResponseCode = 201  // TRANSACTION_SHOULD_ROLLBACK
	ResTransactionStateUnknown    ResponseCode = 202  // TRANSACTION_STATE_UNKNOW
	ResTransactionStateGroupWrong ResponseCode = 203  // TRANSACTION_STATE_GROUP_WRONG
	ResNoBuyerID                  ResponseCode = 204  // NO_BUYER_ID
	ResNotInCurrentUnit           ResponseCode = 205  // NOT_IN_CURRENT_UNIT
	ResConsumerNotOnline          ResponseCode = 206  // CONSUMER_NOT_ONLINE
	ResConsumeMsgTimeout          ResponseCode = 207  // CONSUME_MSG_TIMEOUT
	ResNoMessage                  ResponseCode = 208  // NO_MESSAGE
	ResPollingFull                ResponseCode = 209  // POLLING_FULL
	ResPollingTimeout             ResponseCode = 210  // POLLING_TIMEOUT
	ResBrokerNotExist             ResponseCode = 211  // BROKER_NOT_EXIST
	ResBrokerDispatchNotComplete  ResponseCode = 212  // BROKER_DISPATCH_NOT_COMPLETE
	ResBroadcastConsumption       ResponseCode = 213  // BROADCAST_CONSUMPTION
	ResFlowControl                ResponseCode = 215  // FLOW_CONTROL
	ResNotLeaderForQueue          ResponseCode = 501  // NOT_LEADER_FOR_QUEUE
	ResIllegalOperation           ResponseCode = 604  // ILLEGAL_OPERATION
	ResGoAway                     ResponseCode = 1500 // GO_AWAY
)

var responseCodeNames = map[ResponseCode]string{
	ResSuccess:                    "SUCCESS",
	ResSystemError:                "SYSTEM_ERROR",
	ResSystemBusy:                 "SYSTEM_BUSY",
	ResRequestCodeNotSupported:    "REQUEST_CODE_NOT_SUPPORTED",
	ResTransactionFailed:          "TRANSACTION_FAILED",
	ResFlushDiskTimeout:           "FLUSH_DISK_TIMEOUT",
	ResSlaveNotAvailable:          "SLAVE_NOT_AVAILABLE",
	ResFlushSlaveTimeout:          "FLUSH_SLAVE_TIMEOUT",
	ResMessageIllegal:             "MESSAGE_ILLEGAL",
	ResServiceNotAvailable:        "SERVICE_NOT_AVAILABLE",
	ResVersionNotSupported:        "VERSION_NOT_SUPPORTED",
	ResNoPermission:               "NO_PERMISSION",
	ResTopicNotExist:              "TOPIC_NOT_EXIST",
	ResTopicExistAlready:          "TOPIC_EXIST_ALREADY",
	ResPullNotFound:               "PULL_NOT_FOUND",
	ResPullRetryImmediately:       "PULL_RETRY_IMMEDIATELY",
	ResPullOffsetMoved:            "PULL_OFFSET_MOVED",
	ResQueryNotFound:              "QUERY_NOT_FOUND",
	ResSubscriptionParseFailed:    "SUBSCRIPTION_PARSE_FAILED",
	ResSubscriptionNotExist:       "SUBSCRIPTION_NOT_EXIST",
	ResSubscriptionNotLatest:      "SUBSCRIPTION_NOT_LATEST",
	ResSubscriptionGroupNotExist:  "SUBSCRIPTION_GROUP_NOT_EXIST",
	ResFilterDataNotExist:         "FILTER_DATA_NOT_EXIST",
	ResFilterDataNotLatest:        "FILTER_DATA_NOT_LATEST",
	ResInvalidParameter:           "INVALID_PARAMETER",
	ResTransactionShouldCommit:    "TRANSACTION_SHOULD_COMMIT",
	ResTransactionShouldRollback:  "TRANSACTION_SHOULD_ROLLBACK",
	ResTransactionStateUnknown:    "TRANSACTION_STATE_UNKNOW",
	ResTransactionStateGroupWrong: "TRANSACTION_STATE_GROUP_WRONG",
	ResNoBuyerID:                  "NO_BUYER_ID",
	ResNotInCurrentUnit:           "NOT_IN_CURRENT_UNIT",
	ResConsumerNotOnline:          "CONSUMER_NOT_ONLINE",
	ResConsumeMsgTimeout:          "CONSUME_MSG_TIMEOUT",
	ResNoMessage:                  "NO_MESSAGE",
	ResPollingFull:                "POLLING_FULL",
	ResPollingTimeout:             "POLLING_TIMEOUT",
	ResBrokerNotExist:             "BROKER_NOT_EXIST",
	ResBrokerDispatchNotComplete:  "BROKER_DISPATCH_NOT_COMPLETE",
	ResBroadcastConsumption:       "BROADCAST_CONSUMPTION",
	ResFlowControl:                "FLOW_CONTROL",
	ResNotLeaderForQueue:          "NOT_LEADER_FOR_QUEUE",
	ResIllegalOperation:           "ILLEGAL_OPERATION",
	ResGoAway:                     "GO_AWAY",
}

// Name returns the RocketMQ name of c ("SEND_MESSAGE"), or "" when c has none.
func (c RequestCode) Name() string { return requestCodeNames[c] }

// String returns the RocketMQ name and number of c: "SEND_MESSAGE(10)", or
// "RequestCode(9999)" for a code without a name.
func (c RequestCode) String() string {
	if n, ok := requestCodeNames[c]; ok {
		return n + "(" + strconv.Itoa(int(c)) + ")"
	}
	return "RequestCode(" + strconv.Itoa(int(c)) + ")"
}

// Name returns the RocketMQ name of c ("TOPIC_NOT_EXIST"), or "" when c has none.
func (c ResponseCode) Name() string { return responseCodeNames[c] }

// String returns the RocketMQ name and number of c: "TOPIC_NOT_EXIST(17)",
// or "ResponseCode(9999)" for a code without a name.
func (c ResponseCode) String() string {
	if n, ok := responseCodeNames[c]; ok {
		return n + "(" + strconv.Itoa(int(c)) + ")"
	}
	return "ResponseCode(" + strconv.Itoa(int(c)) + ")"
}
