"""Word lists behind the synthetic store generator (`backend.store.seed`).

Our own lists of given names, family names, streets, US cities (with their state and the
first digits of their ZIP codes), card brands and a catalogue of product types, each with
its option axes and a typical price range in whole dollars. Nothing here is copied from a
benchmark; the generator combines these at random (deterministically by seed).
"""

from __future__ import annotations

from dataclasses import dataclass

FIRST_NAMES = (
    "Aaron", "Abigail", "Adrian", "Aisha", "Alan", "Alice", "Amara", "Andre", "Angela", "Anika",
    "Arjun", "Beatrice", "Benjamin", "Bianca", "Caleb", "Camila", "Carlos", "Chen", "Chloe", "Daniel",
    "Dario", "Diana", "Dmitri", "Eleanor", "Elias", "Elif", "Emeka", "Esther", "Fatima", "Felix",
    "Fiona", "Gabriel", "Grace", "Hana", "Hassan", "Helena", "Hugo", "Imani", "Ingrid", "Isaac",
    "Ivy", "Jamal", "Javier", "Jasmine", "Jonah", "Julia", "Kai", "Kenji", "Keira", "Lars",
    "Layla", "Leon", "Lina", "Lucas", "Magnus", "Maya", "Mei", "Mateo", "Nadia", "Nathan",
    "Nia", "Oliver", "Omar", "Paloma", "Priya", "Quinn", "Rafael", "Rosa", "Ruth", "Samuel",
    "Sana", "Silas", "Sofia", "Tariq", "Tessa", "Theo", "Uma", "Valeria", "Victor", "Wei",
    "Willa", "Xavier", "Yara", "Yusuf", "Zane", "Zoe",
)

LAST_NAMES = (
    "Abbott", "Adeyemi", "Alvarez", "Andersen", "Bauer", "Becker", "Bennett", "Bianchi", "Brooks",
    "Castillo", "Chandra", "Chowdhury", "Coleman", "Dubois", "Duarte", "Eriksen", "Ferreira", "Fischer",
    "Fitzgerald", "Gallagher", "Greco", "Gupta", "Haddad", "Hansen", "Hayes", "Horvath", "Ibrahim",
    "Ivanova", "Jensen", "Kaplan", "Kato", "Kowalski", "Lambert", "Larsen", "Lindqvist", "Mahmoud",
    "Marino", "Mendes", "Morales", "Nakamura", "Novak", "Nwosu", "Okafor", "Olsen", "Ortega", "Park",
    "Petrov", "Quintero", "Ramos", "Reyes", "Richter", "Rossetti", "Sato", "Schmidt", "Serrano",
    "Shapiro", "Sharma", "Sokolov", "Suzuki", "Takahashi", "Tanaka", "Torres", "Varga", "Vasquez",
    "Wagner", "Walsh", "Weber", "Yilmaz", "Young", "Zhou", "Zimmerman",
)

STREET_NAMES = (
    "Alder Lane", "Aspen Court", "Bayview Road", "Birch Avenue", "Canal Street", "Cedar Ridge",
    "Chestnut Way", "Clover Drive", "Copper Hill Road", "Cypress Boulevard", "Elm Park", "Fairview Terrace",
    "Foxglove Lane", "Granite Street", "Harbor Way", "Hawthorn Avenue", "Juniper Road", "Lakeshore Drive",
    "Laurel Street", "Linden Avenue", "Magnolia Court", "Maple Crest", "Meadow Lane", "Mill Street",
    "Orchard Road", "Pinecrest Avenue", "Quarry Road", "Railroad Avenue", "Redwood Drive", "Ridgeview Way",
    "Riverside Avenue", "Rosewood Lane", "Sandstone Court", "Spruce Street", "Stonebridge Road",
    "Summit Avenue", "Sycamore Street", "Tamarack Way", "Valley View Road", "Willow Bend",
)

UNIT_KINDS = ("Suite", "Apt", "Unit")

# (city, state, first three digits of its ZIP codes)
CITIES = (
    ("Albuquerque", "NM", "871"), ("Atlanta", "GA", "303"), ("Austin", "TX", "787"),
    ("Baltimore", "MD", "212"), ("Boise", "ID", "837"), ("Boston", "MA", "021"),
    ("Charlotte", "NC", "282"), ("Chicago", "IL", "606"), ("Cleveland", "OH", "441"),
    ("Columbus", "OH", "432"), ("Denver", "CO", "802"), ("Des Moines", "IA", "503"),
    ("Detroit", "MI", "482"), ("Honolulu", "HI", "968"), ("Houston", "TX", "770"),
    ("Indianapolis", "IN", "462"), ("Kansas City", "MO", "641"), ("Las Vegas", "NV", "891"),
    ("Louisville", "KY", "402"), ("Madison", "WI", "537"), ("Memphis", "TN", "381"),
    ("Miami", "FL", "331"), ("Milwaukee", "WI", "532"), ("Minneapolis", "MN", "554"),
    ("Nashville", "TN", "372"), ("New Orleans", "LA", "701"), ("New York", "NY", "100"),
    ("Oakland", "CA", "946"), ("Omaha", "NE", "681"), ("Orlando", "FL", "328"),
    ("Philadelphia", "PA", "191"), ("Phoenix", "AZ", "850"), ("Pittsburgh", "PA", "152"),
    ("Portland", "OR", "972"), ("Providence", "RI", "029"), ("Raleigh", "NC", "276"),
    ("Richmond", "VA", "232"), ("Sacramento", "CA", "958"), ("Salt Lake City", "UT", "841"),
    ("San Diego", "CA", "921"), ("Seattle", "WA", "981"), ("Spokane", "WA", "992"),
    ("St. Louis", "MO", "631"), ("Tampa", "FL", "336"), ("Tucson", "AZ", "857"),
    ("Tulsa", "OK", "741"),
)

CARD_BRANDS = ("visa", "mastercard", "amex", "discover")
EMAIL_DOMAINS = ("example.com", "example.org", "example.net")


@dataclass(frozen=True)
class ProductType:
    """A kind of product: its option axes (each variant picks one value per axis) and price range."""

    name: str
    min_price: int
    max_price: int
    options: tuple[tuple[str, tuple[str, ...]], ...]


def _pt(name: str, lo: int, hi: int, **axes: tuple[str, ...]) -> ProductType:
    return ProductType(name, lo, hi, tuple((k.replace("_", " "), v) for k, v in axes.items()))


COLORS = ("black", "white", "gray", "navy", "red", "green", "beige")

PRODUCT_TYPES = (
    _pt("Air Purifier", 120, 420, room_size=("small", "medium", "large"), filter=("HEPA", "carbon"),
        color=("white", "black")),
    _pt("Backpack", 35, 140, capacity=("18L", "25L", "32L"), material=("nylon", "canvas", "recycled polyester"),
        color=COLORS[:5]),
    _pt("Bath Towel Set", 25, 90, pieces=("4", "6", "8"), fabric=("cotton", "bamboo", "linen"),
        color=("white", "sand", "sage", "slate")),
    _pt("Bed Frame", 180, 900, size=("twin", "full", "queen", "king"), material=("oak", "walnut", "steel"),
        storage=("drawers", "none")),
    _pt("Bicycle Helmet", 30, 160, size=("S", "M", "L"), style=("road", "mountain", "commuter"),
        color=("black", "white", "orange")),
    _pt("Blender", 40, 380, power=("600W", "1000W", "1500W"), jar=("glass", "plastic"),
        color=("black", "silver", "red")),
    _pt("Board Game", 15, 80, theme=("strategy", "party", "cooperative", "trivia"),
        players=("2-4", "2-6", "4-10"), language=("English", "Spanish")),
    _pt("Camping Stove", 30, 190, fuel=("butane", "propane", "multi-fuel"), burners=("1", "2")),
    _pt("Ceiling Fan", 80, 420, blade_span=("42 inch", "52 inch", "60 inch"), light=("LED", "none"),
        finish=("matte black", "brushed nickel", "white")),
    _pt("Chef Knife", 25, 260, blade_length=("6 inch", "8 inch", "10 inch"), steel=("carbon", "stainless",
        "damascus"), handle=("wood", "resin")),
    _pt("Coffee Grinder", 25, 320, mechanism=("blade", "conical burr", "flat burr"),
        capacity=("60g", "250g", "400g"), color=("black", "silver")),
    _pt("Cookware Set", 90, 520, pieces=("5", "8", "12"), material=("stainless steel", "cast iron",
        "nonstick aluminium"), induction=("yes", "no")),
    _pt("Desk Chair", 110, 650, material=("mesh", "leather", "fabric"), color=("black", "gray", "blue"),
        armrests=("fixed", "adjustable"), headrest=("yes", "no")),
    _pt("Desk Lamp", 20, 150, color=("black", "white", "brass"), bulb=("LED", "halogen"),
        dimmable=("yes", "no")),
    _pt("Digital Thermometer", 12, 60, type=("oral", "forehead", "ear"), display=("LCD", "backlit")),
    _pt("Dining Table", 220, 1400, seats=("4", "6", "8"), material=("oak", "glass", "marble"),
        shape=("round", "rectangular")),
    _pt("Drone", 180, 1600, camera=("2.7K", "4K", "6K"), flight_time=("20 min", "30 min", "45 min"),
        color=("gray", "white")),
    _pt("Dumbbell Pair", 30, 380, weight=("5 lb", "10 lb", "20 lb", "35 lb", "50 lb"),
        material=("rubber", "iron", "neoprene")),
    _pt("E-Reader", 90, 330, storage=("8GB", "16GB", "32GB"), screen=("6 inch", "7 inch", "10 inch"),
        connectivity=("wifi", "wifi + cellular")),
    _pt("Electric Toothbrush", 25, 230, modes=("2", "4", "6"), battery=("rechargeable", "AA"),
        color=("white", "black", "pink")),
    _pt("Espresso Machine", 160, 1500, pressure=("9 bar", "15 bar", "19 bar"), milk_frother=("yes", "no"),
        type=("manual", "semi-automatic", "automatic")),
    _pt("Fitness Tracker", 40, 290, band=("silicone", "fabric", "metal"), gps=("yes", "no"),
        color=("black", "rose", "blue")),
    _pt("Floor Rug", 60, 780, size=("4x6 ft", "5x8 ft", "8x10 ft"), material=("wool", "jute", "polypropylene"),
        pattern=("solid", "geometric", "vintage")),
    _pt("Garden Hose", 20, 110, length=("25 ft", "50 ft", "100 ft"), material=("rubber", "vinyl",
        "expandable")),
    _pt("Hair Dryer", 25, 410, wattage=("1200W", "1800W", "2000W"), technology=("ionic", "ceramic",
        "tourmaline"), color=("black", "white", "lilac")),
    _pt("Headphones", 40, 520, style=("over-ear", "on-ear", "in-ear"), connectivity=("wired", "wireless"),
        noise_cancelling=("yes", "no"), color=("black", "silver", "blue")),
    _pt("Hiking Backpack", 70, 320, capacity=("35L", "50L", "65L"), frame=("internal", "frameless"),
        color=("olive", "orange", "charcoal")),
    _pt("Indoor Plant Pot", 12, 95, diameter=("6 inch", "10 inch", "14 inch"), material=("ceramic",
        "terracotta", "concrete"), drainage=("yes", "no")),
    _pt("Jigsaw Puzzle", 10, 55, pieces=("500", "1000", "2000"), theme=("landscape", "animals", "art",
        "maps")),
    _pt("Kayak Paddle", 45, 260, length=("210 cm", "220 cm", "230 cm"), shaft=("aluminium", "fiberglass",
        "carbon")),
    _pt("Laptop", 480, 2600, screen=("13 inch", "14 inch", "16 inch"), processor=("4-core", "8-core",
        "12-core"), ram=("8GB", "16GB", "32GB"), storage=("256GB SSD", "512GB SSD", "1TB SSD")),
    _pt("Mattress", 250, 1800, size=("twin", "full", "queen", "king"), firmness=("soft", "medium", "firm"),
        type=("memory foam", "hybrid", "latex")),
    _pt("Mechanical Keyboard", 50, 260, switch=("linear", "tactile", "clicky"), layout=("full size",
        "tenkeyless", "compact"), backlight=("RGB", "white", "none")),
    _pt("Microwave Oven", 70, 420, capacity=("0.7 cu ft", "1.2 cu ft", "1.6 cu ft"), finish=("stainless",
        "black", "white")),
    _pt("Monitor", 120, 1300, size=("24 inch", "27 inch", "32 inch"), resolution=("1080p", "1440p", "4K"),
        refresh_rate=("60Hz", "144Hz")),
    _pt("Phone Case", 10, 65, model=("standard", "plus", "mini"), material=("silicone", "leather",
        "clear polycarbonate"), color=COLORS[:4]),
    _pt("Portable Charger", 18, 120, capacity=("5000mAh", "10000mAh", "20000mAh"), ports=("1", "2", "3"),
        color=("black", "white")),
    _pt("Rain Jacket", 45, 310, size=("XS", "S", "M", "L", "XL"), color=("yellow", "navy", "olive", "black"),
        hood=("yes", "no")),
    _pt("Robot Vacuum", 160, 1100, navigation=("random", "gyroscope", "lidar"), mopping=("yes", "no"),
        color=("black", "white")),
    _pt("Running Shoes", 60, 240, size=("7", "8", "9", "10", "11", "12"), width=("regular", "wide"),
        color=("black", "white", "blue", "coral")),
    _pt("Sleeping Bag", 40, 380, temperature_rating=("0F", "20F", "40F"), fill=("down", "synthetic"),
        length=("regular", "long")),
    _pt("Smart Speaker", 35, 420, size=("mini", "standard", "large"), color=("charcoal", "chalk", "blue")),
    _pt("Smartphone", 280, 1400, storage=("128GB", "256GB", "512GB"), color=("black", "silver", "green",
        "purple"), screen=("6.1 inch", "6.7 inch")),
    _pt("Stand Mixer", 120, 620, bowl=("4.5 qt", "5 qt", "6 qt"), color=("red", "cream", "graphite",
        "mint")),
    _pt("Sunglasses", 20, 340, frame=("acetate", "metal", "plastic"), lens=("polarized", "gradient",
        "mirrored"), color=("black", "tortoise", "gold")),
    _pt("Tablet", 180, 1300, screen=("8 inch", "10 inch", "12 inch"), storage=("64GB", "128GB", "256GB"),
        connectivity=("wifi", "wifi + cellular"), color=("silver", "gray")),
    _pt("Tent", 80, 720, capacity=("1 person", "2 person", "4 person", "6 person"),
        season=("3-season", "4-season"), color=("green", "orange", "gray")),
    _pt("Travel Suitcase", 70, 480, size=("carry-on", "medium", "large"), shell=("hard", "soft"),
        color=("black", "navy", "silver", "teal")),
    _pt("Video Game Console Controller", 35, 190, platform=("console", "PC", "universal"),
        connectivity=("wired", "wireless"), color=("black", "white", "red")),
    _pt("Wall Clock", 15, 140, diameter=("10 inch", "14 inch", "18 inch"), style=("modern", "rustic",
        "minimalist"), movement=("quartz", "silent sweep")),
    _pt("Winter Coat", 90, 560, size=("XS", "S", "M", "L", "XL", "XXL"), insulation=("down", "synthetic"),
        color=("black", "camel", "navy")),
    _pt("Wireless Earbuds", 30, 300, color=("black", "white", "blue"), battery_life=("5 hours", "8 hours"),
        water_resistance=("IPX4", "IPX7", "none")),
    _pt("Yoga Mat", 18, 130, thickness=("3 mm", "5 mm", "8 mm"), material=("TPE", "natural rubber", "cork"),
        color=("purple", "teal", "black", "pink")),
)
