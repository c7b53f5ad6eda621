package remoting_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gantrymq/gantry/remoting"
)

// The codes the Go client uses, with their RocketMQ numbers and names.
func TestCodeNames(t *testing.T) {
	requests := []struct {
		code remoting.RequestCode
		want string
	}{
		{remoting.ReqSendMessage, "SEND_MESSAGE(10)"},
		{remoting.ReqPullMessage, "PULL_MESSAGE(11)"},
		{remoting.ReqQueryMessage, "QUERY_MESSAGE(12)"},
		{remoting.ReqQueryConsumerOffset, "QUERY_CONSUMER_OFFSET(14)"},
		{remoting.ReqUpdateConsumerOffset, "UPDATE_CONSUMER_OFFSET(15)"},
		{remoting.ReqUpdateAndCreateTopic, "UPDATE_AND_CREATE_TOPIC(17)"},
		{remoting.ReqSearchOffsetByTimestamp, "SEARCH_OFFSET_BY_TIMESTAMP(29)"},
		{remoting.ReqGetMaxOffset, "GET_MAX_OFFSET(30)"},
		{remoting.ReqGetMinOffset, "GET_MIN_OFFSET(31)"},
		{remoting.ReqViewMessageByID, "VIEW_MESSAGE_BY_ID(33)"},
		{remoting.ReqHeartBeat, "HEART_BEAT(34)"},
		{remoting.ReqUnregisterClient, "UNREGISTER_CLIENT(35)"},
		{remoting.ReqConsumerSendMsgBack, "CONSUMER_SEND_MSG_BACK(36)"},
		{remoting.ReqEndTransaction, "END_TRANSACTION(37)"},
		{remoting.ReqGetConsumerListByGroup, "GET_CONSUMER_LIST_BY_GROUP(38)"},
		{remoting.ReqCheckTransactionState, "CHECK_TRANSACTION_STATE(39)"},
		{remoting.ReqNotifyConsumerIDsChanged, "NOTIFY_CONSUMER_IDS_CHANGED(40)"},
		{remoting.ReqLockBatchMQ, "LOCK_BATCH_MQ(41)"},
		{remoting.ReqUnlockBatchMQ, "UNLOCK_BATCH_MQ(42)"},
		{remoting.ReqRegisterBroker, "REGISTER_BROKER(103)"},
		{remoting.ReqUnregisterBroker, "UNREGISTER_BROKER(104)"},
		{remoting.ReqGetRouteInfoByTopic, "GET_ROUTEINFO_BY_TOPIC(105)"},
		{remoting.ReqGetBrokerClusterInfo, "GET_BROKER_CLUSTER_INFO(106)"},
		{remoting.ReqGetAllSubscriptionGroupConfig, "GET_ALL_SUBSCRIPTIONGROUP_CONFIG(201)"},
		{remoting.ReqGetAllTopicListFromNameServer, "GET_ALL_TOPIC_LIST_FROM_NAMESERVER(206)"},
		{remoting.ReqDeleteTopicInBroker, "DELETE_TOPIC_IN_BROKER(215)"},
		{remoting.ReqDeleteTopicInNameServer, "DELETE_TOPIC_IN_NAMESRV(216)"},
		{remoting.ReqResetConsumerClientOffset, "RESET_CONSUMER_CLIENT_OFFSET(220)"},
		{remoting.ReqGetConsumerStatusFromClient, "GET_CONSUMER_STATUS_FROM_CLIENT(221)"},
		{remoting.ReqGetConsumerRunningInfo, "GET_CONSUMER_RUNNING_INFO(307)"},
		{remoting.ReqConsumeMessageDirectly, "CONSUME_MESSAGE_DIRECTLY(309)"},
		{remoting.ReqSendMessageV2, "SEND_MESSAGE_V2(310)"},
		{remoting.ReqSendBatchMessage, "SEND_BATCH_MESSAGE(320)"},
		{remoting.ReqSendReplyMessage, "SEND_REPLY_MESSAGE(324)"},
		{remoting.ReqSendReplyMessageV2, "SEND_REPLY_MESSAGE_V2(325)"},
		{remoting.ReqPushReplyMessageToClient, "PUSH_REPLY_MESSAGE_TO_CLIENT(326)"},
		{remoting.RequestCode(9999), "RequestCode(9999)"},
	}
	for _, tt := range requests {
		assert.Equal(t, tt.want, tt.code.String())
	}
	responses := []struct {
		code remoting.ResponseCode
		want string
	}{
		{remoting.ResSuccess, "SUCCESS(0)"},
		{remoting.ResSystemError, "SYSTEM_ERROR(1)"},
		{remoting.ResSystemBusy, "SYSTEM_BUSY(2)"},
		{remoting.ResRequestCodeNotSupported, "REQUEST_CODE_NOT_SUPPORTED(3)"},
		{remoting.ResFlushDiskTimeout, "FLUSH_DISK_TIMEOUT(10)"},
		{remoting.ResSlaveNotAvailable, "SLAVE_NOT_AVAILABLE(11)"},
		{remoting.ResFlushSlaveTimeout, "FLUSH_SLAVE_TIMEOUT(12)"},
		{remoting.ResMessageIllegal, "MESSAGE_ILLEGAL(13)"},
		{remoting.ResServiceNotAvailable, "SERVICE_NOT_AVAILABLE(14)"},
		{remoting.ResNoPermission, "NO_PERMISSION(16)"},
		{remoting.ResTopicNotExist, "TOPIC_NOT_EXIST(17)"},
		{remoting.ResPullNotFound, "PULL_NOT_FOUND(19)"},
		{remoting.ResPullRetryImmediately, "PULL_RETRY_IMMEDIATELY(20)"},
		{remoting.ResPullOffsetMoved, "PULL_OFFSET_MOVED(21)"},
		{remoting.ResQueryNotFound, "QUERY_NOT_FOUND(22)"},
		{remoting.ResSubscriptionParseFailed, "SUBSCRIPTION_PARSE_FAILED(23)"},
		{remoting.ResInvalidParameter, "INVALID_PARAMETER(29)"},
		{remoting.ResGoAway, "GO_AWAY(1500)"},
		{remoting.ResponseCode(-7), "ResponseCode(-7)"},
	}
	for _, tt := range responses {
		assert.Equal(t, tt.want, tt.code.String())
	}
	assert.Equal(t, "HEART_BEAT", remoting.ReqHeartBeat.Name())
	assert.Empty(t, remoting.RequestCode(1).Name())
	assert.Equal(t, "QUERY_NOT_FOUND", remoting.ResQueryNotFound.Name())
}

func TestNotSupported(t *testing.T) {
	req := &remoting.Command{Code: 12, Opaque: 5, SerializeType: remoting.RocketMQ}
	resp := remoting.NotSupported(req)
	assert.Equal(t, &remoting.Command{
		Code: int16(remoting.ResRequestCodeNotSupported), Language: "JAVA", Version: remoting.VersionV5_3_3,
		Opaque: 5, Flag: remoting.FlagResponse, Remark: "request code 12 (QUERY_MESSAGE) is not supported by Gantry",
		SerializeType: remoting.RocketMQ,
	}, resp)
	assert.Equal(t, "request code 4242 (unknown) is not supported by Gantry", remoting.NotSupported(&remoting.Command{Code: 4242}).Remark)
}
