"""Creates (or recreates) the lock table the way template.yaml does.

Usage: python create_table.py TABLE_NAME   (endpoint from AWS_ENDPOINT_URL_DYNAMODB)
"""

import sys

import boto3


def main() -> None:
    table = sys.argv[1]
    dynamodb = boto3.client("dynamodb")
    if table in dynamodb.list_tables()["TableNames"]:
        dynamodb.delete_table(TableName=table)
    dynamodb.create_table(
        TableName=table,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[
            {"AttributeName": "lockName", "AttributeType": "S"},
            {"AttributeName": "owner", "AttributeType": "S"},
        ],
        KeySchema=[{"AttributeName": "lockName", "KeyType": "HASH"}],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "owner-index",
                "KeySchema": [{"AttributeName": "owner", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            }
        ],
    )
    dynamodb.update_time_to_live(
        TableName=table,
        TimeToLiveSpecification={"Enabled": True, "AttributeName": "ttl"},
    )
    print(f"created table {table}")


if __name__ == "__main__":
    main()
