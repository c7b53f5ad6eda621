// Package message owns Gantry's stored record: RocketMQ's V1 MessageExt
// encoding (Java's MessageDecoder), which is both the commit-log entry
// and the element of a PULL_MESSAGE response body, so the broker can serve
// log bytes as stored. It also owns the properties string, offset and
// client message ids and the consume-queue tag hash. It imports only the
// standard library.
//
// # Record format
//
// All integers are big-endian and signed. A record with IPv4 born and store
// hosts is laid out as: TOTALSIZE int32 (the whole record, this field
// included) at 0; MAGICCODE int32 at 4 (MagicV1); BODYCRC int32 at 8
// (CRC-32/IEEE of the stored body AND 0x7FFFFFFF, as Java computes it);
// QUEUEID int32 at 12; FLAG int32 at 16; QUEUEOFFSET int64 at 20;
// PHYSICALOFFSET int64 at 28 (the record's commit-log offset); SYSFLAG int32
// at 36; BORNTIMESTAMP int64 at 40; BORNHOST at 48 (4 address bytes and an
// int32 port); STORETIMESTAMP int64 at 56; STOREHOST at 64; RECONSUMETIMES
// int32 at 72; PREPARED TRANSACTION OFFSET int64 at 76; BODYLEN int32 at 84;
// the body at 88; then TOPICLEN (one byte, at most 127), the topic, and
// PROPERTIESLEN (int16) followed by the properties. The size is therefore
// MinRecordSize (91) + body + topic + properties. A host flagged IPv6 in
// SYSFLAG (FlagBornHostV6 0x10, FlagStoreHostV6 0x20) takes 16 address
// bytes instead of 4, moving every later field by 12 bytes.
//
// Properties are "key 0x01 value 0x02" for every pair. Every record Gantry
// writes ends its properties with the 20-byte __CRC32# tail of RocketMQ's
// append-prop CRC (§4.2): "__CRC32#", 0x01, ten ASCII digits least
// significant first, 0x02. The digits hold CRC-32/IEEE of all record bytes
// before the tail AND 0x7FFFFFFF, which is what Java's UtilAll.crc32 writes
// and checks, so recovery can verify every byte. The end of a commit-log
// segment is marked by an 8-byte filler: the int32 count of bytes left in
// the segment, then MagicBlank.
//
// Append only writes V1. Decode and Check also accept V2 (MagicV2, a 2-byte
// topic length) as written by Java brokers for topics over 127 bytes;
// re-encoding such a record gives V1, which needs a topic of at most
// MaxTopicLen bytes.
//
// # Writing and stamping
//
// EncodedSize validates a Message and sizes its record; Append encodes it
// with one growth of dst and no other allocation, optionally with a sealed
// __CRC32# tail. The commit log then stamps the fields it assigns under its
// append lock in the final buffer (Stamp, or SetPhysicalOffset,
// SetQueueOffset, SetStoreTimestamp, SetReconsumeTimes followed by SealCRC).
//
// # Reading
//
// Check validates one record (structure, body CRC, position, __CRC32#) at
// memory speed without allocating; a record that passes Check decodes.
// Decode, DecodeInto, DecodeAliasing and DecodeAll check every length
// against TOTALSIZE and the buffer before slicing and never panic,
// whatever the input; they do not verify checksums. RecordSize and the
// ...Of accessors read single fields of an encoded record without
// decoding it.
//
// # Concurrency and allocation
//
// Every function is safe for concurrent use on distinct buffers (the
// setters write their rec argument); a UniqIDGenerator is safe for
// concurrent use. These do not allocate: Append into a dst with room,
// Check, HasCRC, SealCRC, SealTail, Stamp, the Set... and ...Of functions,
// RecordSize, AppendBlank, AppendOffsetMsgID into a dst with room,
// UniqIDGenerator.AppendNext (but once a month), JavaHashCode and TagsCode,
// Properties.Get. Errors allocate. These allocate: Decode (the Message, the
// body copy, one string for topic and properties, the Properties slice),
// DecodeInto (one string, and the Properties slice unless m's can be
// reused), DecodeAliasing (only when its slab of properties is short: its
// strings and body alias the buffer, which must not change), DecodeAll, DecodeProperties, EncodeOffsetMsgID,
// UniqIDGenerator.Next, NewUniqID and the Message id and key methods.
package message
